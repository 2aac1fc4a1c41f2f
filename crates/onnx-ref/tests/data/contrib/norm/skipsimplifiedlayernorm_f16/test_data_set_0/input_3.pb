
BbiasJ]9ì∫QºÁ∞@d¡sºd¿