package main

import (
	"net"
	"strconv"
)

// checkListenAddr checks addr, the value of the listen address flag flag
// (example is a good value for the message),
// before anything starts: host:port (the host may be empty, for every
// interface), the port a number 0–65535 (0: any free one). Anything else
// is a usage error naming the flag.
func checkListenAddr(flag, addr, example string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("demo: %s %q: want HOST:PORT or :PORT, for example %s (%v)", flag, addr, example, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || port == "" || n > 65535 {
		return usagef("demo: %s %q: the port must be a number from 0 to 65535", flag, addr)
	}
	return nil
}
