package natsconf_test

import (
	"fmt"
	"strings"

	"github.com/cuecast/cuecast/internal/natsconf"
)

func ExampleGenerate() {
	spec := natsconf.Spec{
		Level:      natsconf.Node,
		Name:       "host-17",
		Listen:     "127.0.0.1:4222",
		StoreDir:   "/var/lib/nats",
		Upstreams:  []string{"eu-west-a:7422"},
		Namespaces: []string{"payments"},
	}
	spec.Passwords = map[string]string{}
	for _, u := range spec.Users() {
		spec.Passwords[u] = "secret-of-" + u
	}
	conf, err := natsconf.Generate(spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(conf, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "domain:") || strings.Contains(line, "deny_") || strings.Contains(line, `"svc-payments"`) {
			fmt.Println(strings.TrimSpace(line))
		}
	}
	perm, _ := natsconf.UserPermissions(natsconf.ServiceUser("payments"))
	fmt.Println(perm.Subscribe)
	// Output:
	// domain: "host-17"
	// deny_imports: ["ccr.>"]
	// deny_exports: ["ccr.>"]
	// user: "svc-payments"
	// [ccr.payments.> _INBOX_payments.>]
}
