
Bsegment_embeddingJ y2+½59·¨HB½¯ãº¸¹²º½»È5;­9å3Î:*¶