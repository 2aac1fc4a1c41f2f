
BgammaJ*=o5D<Æ,W0@1º(À¸