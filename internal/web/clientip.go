package web

import (
	"net"
	"net/http"
	"strings"

	"github.com/go-chi/httprate"
)

// ClientIP is the address a request came from, canonical (an IPv6
// address as its /64): the first entry of header when a trusted load
// balancer sets it (header not empty), else the connection's peer.
func ClientIP(r *http.Request, header string) string {
	if header != "" {
		if v := strings.TrimSpace(strings.Split(r.Header.Get(header), ",")[0]); v != "" {
			return httprate.CanonicalizeIP(v)
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return httprate.CanonicalizeIP(host)
}
