Blogits_per_textJ,‰¤>Lì©>0©
>‘ÈM>