Bx2Jm’
¡Arz