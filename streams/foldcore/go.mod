module podledger/foldcore

go 1.26
