
BscaleJp0;บฮต,ภTนว7c+\4