module example.com/cgoleak

go 1.22
