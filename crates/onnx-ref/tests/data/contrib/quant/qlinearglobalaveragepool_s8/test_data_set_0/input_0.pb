BXJxyr°³­Ùû»s+*¨eÐ[I€ù
÷›8ÂÙêÌôV÷=m·Â°0+-rìlyaÍ\oÔ&«_YèH¸xKP)ŒG6³[¢æCF…Àr¢×€ëÀÒ!«jG&j•:c69	9gPÈ`¸'rxqLùLR>sÚ”we