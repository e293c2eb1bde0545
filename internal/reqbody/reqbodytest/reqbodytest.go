// Package reqbodytest plays the client reqbody guards against: one that
// announces a body and does not send it.
package reqbodytest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// PartialRequest sends a POST's headers announcing a 100-byte body, and
// one byte of it, on a new connection to addr; it returns the reply read
// in the background: a status line, or why none came. header is name,
// value pairs.
func PartialRequest(t testing.TB, addr, path string, header ...string) <-chan string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
	for i := 0; i+1 < len(header); i += 2 {
		req += header[i] + ": " + header[i+1] + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n{"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			got <- "no reply: " + err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		got <- fmt.Sprintf("%d %s", res.StatusCode, strings.TrimSpace(string(b)))
	}()
	return got
}
