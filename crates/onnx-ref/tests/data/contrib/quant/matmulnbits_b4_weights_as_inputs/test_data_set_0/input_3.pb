Bzero_pointsJÕ
*Ã
•