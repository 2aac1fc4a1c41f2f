BxJRψk„JltΖ\Εκm
·‡ίu^u¤