// Package webtest sends the HTTP requests the tests of serve's operations
// server and of the agent's OFREP make, as a caller would: a method, a URL,
// the Host it claims (a rebinding page's name), a bearer token and a body.
package webtest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Request is one request; an empty Host is the URL's, an empty Token
// sends no Authorization.
type Request struct {
	Method, URL, Host, Token, Body string
}

// Do sends r and returns the status and the body read in full; a request
// that cannot be sent fails t.
func Do(t testing.TB, r Request) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(r.Method, r.URL, strings.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	if r.Host != "" {
		req.Host = r.Host
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read the answer to %s %s: %v", r.Method, r.URL, err)
	}
	return res.StatusCode, b
}
