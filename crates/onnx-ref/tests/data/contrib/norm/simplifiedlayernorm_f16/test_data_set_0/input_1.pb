
BscaleJò;–8d¸h½n¸E¥h¸¾