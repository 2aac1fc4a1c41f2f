BYJ<&ïRCûtC°
EC<BêBÍÿB!FCSÅC_½ºBÞ©˜Bh]äB*ºgC$‹wCé]CÐvC„øÇB