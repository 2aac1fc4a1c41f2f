
BbJO5z/é<a*B²’¸³2o>