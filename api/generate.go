// Package api holds the Go code generated from the network API's
// protobuf definitions (proto/sluice/v1): the messages in package
// sluicev1, and the Connect, gRPC and gRPC-Web handlers and clients in
// sluicev1connect. Run go generate ./api after changing a .proto file.
package api

//go:generate sh -c "cd .. && go tool -modfile=tools/go.mod buf lint && go tool -modfile=tools/go.mod buf generate"
