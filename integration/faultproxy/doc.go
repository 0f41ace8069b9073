// Package faultproxy is a TCP proxy for tests that injects network faults
// between a client and a server on the loopback interface: latency, cut
// connections, resets, refused connections and a black hole.
//
// It works on bytes, not on HTTP, so it sees what a real network does to a
// client: an S3 SDK behind it meets the errors (connection reset, EOF,
// timeouts) it meets in production, and its retries run for real.
//
// # Usage
//
// A test starts a proxy to the server and points its client at [Proxy.Addr]
// (or [Proxy.URL]) instead of the server; the proxy is closed, with every
// connection through it, in t.Cleanup:
//
//	p := faultproxy.New(t, srv.Endpoint) // "http://127.0.0.1:9000" or "127.0.0.1:9000"
//	store := open(p.URL())
//	p.SetLatency(50 * time.Millisecond)
//	p.ResetAll()
//
// # Faults
//
// Every control takes effect at once and may be called from any goroutine
// while traffic flows:
//
//   - [Proxy.SetLatency] delays every chunk in both directions by d after it
//     was read: a one-way latency, which (unlike a bandwidth limit) does not
//     slow a stream down beyond the delay.
//   - [Proxy.CutAfter] lets n more bytes through towards the server and then
//     closes the connection that carried the n-th one, on both sides: a
//     request cut in the middle, which the server never applies.
//   - [Proxy.CutResponseAfter] lets the request carrying the n-th byte through
//     whole, but closes its connection when the server starts answering: the
//     server applied the request and the client never learns it.
//   - [Proxy.ResetAll] resets every open connection (RST on both sides).
//   - [Proxy.Refuse] resets every new connection as soon as it is accepted,
//     like a server that is down; open connections are left alone (add
//     ResetAll to drop them too).
//   - [Proxy.Blackhole] stops forwarding anything, on open and new
//     connections alike, until it is lifted: requests hang until the client
//     gives up, and what was held flows on afterwards, as when a network
//     partition heals.
//
// [Proxy.Stats] counts connections, bytes and the faults injected, so a test
// can check that the fault it meant to inject really happened (a test whose
// fault never fired cannot fail).
//
// # Limits
//
// The proxy only connects loopback addresses: it is a test tool, and a
// target elsewhere is refused. It knows nothing of HTTP: a request sent with
// "Expect: 100-continue" (the AWS SDK sends it for uploads over 2 MB) gets
// an interim answer before its body, and CutResponseAfter cuts that answer.
package faultproxy
