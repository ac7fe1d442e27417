module redlockd.local/redlock

go 1.19
