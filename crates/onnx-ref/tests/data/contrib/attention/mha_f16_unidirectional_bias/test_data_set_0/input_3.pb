
Battention_biasJ$_3¿¬2’³e7Ø¬¨¿9M5à¹¶;L7¨=:N9S=°ô¼