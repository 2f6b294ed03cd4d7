// Command probe is the container of fault's Docker test: it accepts TCP
// connections on :8000 (and closes them); "probe dial ADDR" connects to
// ADDR and exits 0 if it could (the healthcheck, and the check that a
// service name resolves).
package main

import (
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "dial" {
		c, err := net.DialTimeout("tcp", os.Args[2], 2*time.Second)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("ok")
		return
	}
	l, err := net.Listen("tcp", ":8000")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			continue
		}
		c.Close()
	}
}
