package ha

import (
	"context"
	"net"
	"strconv"
	"testing"
)

// A node's port leaves room for its cluster bus, and the bus port is
// free: Redis exits when it cannot bind it.
func TestFreeNodePortHasAFreeBus(t *testing.T) {
	t.Parallel()
	for range 20 {
		port, err := freeNodePort()
		if err != nil {
			t.Fatal(err)
		}
		if port+clusterBusOffset > 65535 {
			t.Fatalf("port %d: no room for its bus", port)
		}
		for _, p := range []int{port, port + clusterBusOffset} {
			ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				t.Fatalf("port %d of node port %d: %v", p, port, err)
			}
			_ = ln.Close()
		}
	}
}
