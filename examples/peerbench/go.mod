module github.com/partlog/partlog/examples/peerbench

go 1.26.0

require (
	github.com/klauspost/crc32 v1.3.0
	github.com/partlog/partlog v0.0.0
	github.com/stretchr/testify v1.12.1
	github.com/tidwall/wal v1.2.1
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/tidwall/gjson v1.10.2 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/tidwall/tinylru v1.1.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/partlog/partlog => ../..
