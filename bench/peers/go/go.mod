module vatpeer

go 1.19
