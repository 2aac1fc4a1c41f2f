Blogits_per_imageJ,‰¤>0©
>Lì©>‘ÈM>