module github.com/partlog/partlog/examples/broker

go 1.26.0

require (
	github.com/klauspost/compress v1.20.4
	github.com/partlog/partlog v0.0.0
	github.com/partlog/partlog/log/raftlog v0.0.0
	github.com/pierrec/lz4/v4 v4.1.33
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	go.etcd.io/raft/v3 v3.7.0
	google.golang.org/protobuf v1.36.11
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/crc32 v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/partlog/partlog => ../..

replace github.com/partlog/partlog/log/raftlog => ../../log/raftlog
