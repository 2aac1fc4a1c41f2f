
BxJ`F@ЬFШд1╢fCjB8DФ8EC<G÷AЪC╛©зе╨й╠ЪBv╪s5&2E9;╨Ё7k<'Bз╬NE▄Bz@3A╡╟▓ц╫Б© B[аb;o>рдс╩╫6&DЭ©N@.<WаWA