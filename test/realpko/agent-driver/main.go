// Command driver calls one operation of a running PKO v2 agent (`agent serve --auth-mode none`)
// over its gRPC API, the way PKO's operator does, so the agent runs the real Pulumi CLI and logs
// its output. Used only to record test/fixtures/agent-logs/ (see record.sh there): it is built
// inside PKO v2.9.0's source tree (module github.com/pulumi/pulumi-kubernetes-operator/v2), whose
// agent/pkg/proto package it uses.
//
// Usage: driver -addr 127.0.0.1:50051 -op preview|up [-refresh]
// Prints the result's stderr on failure; exits 1 when the operation failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	pb "github.com/pulumi/pulumi-kubernetes-operator/v2/agent/pkg/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "agent address")
	op := flag.String("op", "preview", "preview or up")
	refresh := flag.Bool("refresh", false, "refresh before the operation")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	c := pb.NewAutomationServiceClient(conn)

	switch *op {
	case "preview":
		s, err := c.Preview(ctx, &pb.PreviewRequest{Refresh: refresh})
		if err != nil {
			fail(err)
		}
		for {
			m, err := s.Recv()
			if err == io.EOF {
				return
			}
			if err != nil {
				fail(err)
			}
			if r := m.GetResult(); r != nil {
				fmt.Println("preview succeeded")
			}
		}
	case "up":
		s, err := c.Up(ctx, &pb.UpRequest{Refresh: refresh})
		if err != nil {
			fail(err)
		}
		for {
			m, err := s.Recv()
			if err == io.EOF {
				return
			}
			if err != nil {
				fail(err)
			}
			if r := m.GetResult(); r != nil {
				fmt.Println("up succeeded")
			}
		}
	default:
		fail(fmt.Errorf("unknown -op %q", *op))
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "driver: %v\n", err)
	os.Exit(1)
}
