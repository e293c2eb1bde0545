package hostcheck

import "testing"

func TestForBind(t *testing.T) {
	for _, c := range []struct {
		bind    string
		names   []string
		allowed []string
		refused []string
	}{
		{"127.0.0.1:8080", nil,
			[]string{"127.0.0.1:8080", "127.0.0.1", "localhost:1", "LOCALHOST", "[::1]:8080", "::1", "127.9.9.9:80"},
			[]string{"rebind.attacker.test:8080", "rebind.attacker.test", "10.0.0.1:8080", "", "localhost.attacker.test", "0.0.0.0:8080"}},
		{"localhost:0", nil, []string{"localhost:8080", "127.0.0.1"}, []string{"evil.test"}},
		{"[::1]:0", []string{"cuecast.example", "Tunnel.Local:9000"},
			[]string{"[::1]:1", "cuecast.example:8080", "CUECAST.example", "tunnel.local"},
			[]string{"cuecast.example.attacker.test", "evil.test"}},
		{"0.0.0.0:8080", nil, []string{"anything.test", "", "10.0.0.1"}, nil},
		{":8080", nil, []string{"anything.test"}, nil},
		{"10.1.2.3:8080", []string{"cuecast.example"},
			[]string{"cuecast.example", "10.1.2.3:8080"},
			[]string{"127.0.0.1:8080", "localhost", "rebind.attacker.test"}},
		{"0.0.0.0:8080", []string{"cuecast.example"},
			[]string{"cuecast.example:443"},
			[]string{"0.0.0.0:8080", "127.0.0.1", "rebind.attacker.test"}},
	} {
		a, err := ForBind(c.bind, c.names)
		if err != nil {
			t.Fatalf("ForBind(%q, %q): %v", c.bind, c.names, err)
		}
		for _, h := range c.allowed {
			if !a.Allows(h) {
				t.Errorf("bind %s, names %q: Host %q refused, want allowed", c.bind, c.names, h)
			}
		}
		for _, h := range c.refused {
			if a.Allows(h) {
				t.Errorf("bind %s, names %q: Host %q allowed, want refused", c.bind, c.names, h)
			}
		}
	}
	for _, bad := range [][]string{{"https://cuecast.example"}, {""}, {"cuecast.example/x"}} {
		if _, err := ForBind("127.0.0.1:0", bad); err == nil {
			t.Errorf("ForBind with names %q: no error", bad)
		}
	}
	if _, err := ForBind("8080", nil); err == nil {
		t.Error("ForBind(\"8080\"): no error")
	}
}
