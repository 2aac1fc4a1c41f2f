BbiasJ UD¾ÿ%Z?Gø
=ïEa<²î6¿;kğ>¿U„¿»w*?