package natsconf_test

import "github.com/nats-io/nkeys"

// treeKey signs what the tests' distributors write, as serve's key does;
// their instances trust treePub (clients refuse to start without a key).
var treeKey, treePub = func() (nkeys.KeyPair, string) {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		panic(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		panic(err)
	}
	return kp, pub
}()
