module github.com/partlog/partlog/log/raftlog

go 1.26.0

require (
	github.com/partlog/partlog v0.0.0
	github.com/stretchr/testify v1.12.1
	go.etcd.io/raft/v3 v3.7.0
	google.golang.org/protobuf v1.36.11
)

replace github.com/partlog/partlog => ../..
