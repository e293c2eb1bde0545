package natsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The files EnsureTLS keeps in its directory.
const (
	CAFile    = "ca.pem"
	caKeyFile = "ca-key.pem"
)

// EnsureTLS makes dir hold a private CA (ca.pem, ca-key.pem; created once,
// valid ten years) and a certificate for server name signed by it
// (<name>.pem, <name>-key.pem; valid two years) whose names are hosts: IP
// addresses become IP SANs, anything else DNS SANs. An existing certificate
// is kept while it covers every host and has a year left; otherwise it is
// replaced. Every file is 0600. The certificate serves as client
// certificate too (a leafnode remote presents it).
func EnsureTLS(dir, name string, hosts []string) (*TLS, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create tls directory: %w", err)
	}
	ca, caKey, err := ensureCA(dir)
	if err != nil {
		return nil, err
	}
	t := &TLS{CA: filepath.Join(dir, CAFile), Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
	if covers(t.Cert, hosts) {
		return t, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create key of %s: %w", name, err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"cuecast"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(2, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate of %s: %w", name, err)
	}
	if err := writeKey(t.Key, key); err != nil {
		return nil, err
	}
	if err := writePEM(t.Cert, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return t, nil
}

func ensureCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, caKeyFile)
	cb, cerr := os.ReadFile(certPath)
	kb, kerr := os.ReadFile(keyPath)
	if cerr == nil && kerr == nil {
		cblock, _ := pem.Decode(cb)
		kblock, _ := pem.Decode(kb)
		if cblock == nil || kblock == nil {
			return nil, nil, fmt.Errorf("read CA in %s: not PEM", dir)
		}
		ca, err := x509.ParseCertificate(cblock.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("read CA in %s: %w", dir, err)
		}
		key, err := x509.ParseECPrivateKey(kblock.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("read CA key in %s: %w", dir, err)
		}
		return ca, key, nil
	}
	if !errors.Is(cerr, os.ErrNotExist) || !errors.Is(kerr, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("read CA in %s: %w", dir, errors.Join(cerr, kerr))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("create CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "cuecast NATS CA", Organization: []string{"cuecast"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create CA: %w", err)
	}
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("create CA: %w", err)
	}
	return ca, key, nil
}

// covers reports whether the certificate at path names every host and is
// valid for another year.
func covers(path string, hosts []string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return false
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil || time.Until(c.NotAfter) < 365*24*time.Hour {
		return false
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
				return false
			}
		} else if h != "" && !slices.Contains(c.DNSNames, h) {
			return false
		}
	}
	return true
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, fmt.Errorf("random serial: %w", err)
	}
	return n, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode key %s: %w", path, err)
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
