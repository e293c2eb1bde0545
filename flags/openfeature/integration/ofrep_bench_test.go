package integration_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/flags/ofrep"
)

// BenchmarkOFREPServe is many clients evaluating one flag each over
// loopback HTTP at once, as a fleet does against `cuecast serve --http`
// (the handler, its HTTP server and the clients in this process): the
// issue's ≥ 20,000 single evaluations/s on 2 cores (-cpu 2). evals/s is
// wall-clock and swings with the machine's other load; cpu-ns/op is the
// process's CPU per evaluation, clients included, so 2e9/cpu-ns/op is what
// two dedicated cores sustain at most. BenchmarkServeOFREP (internal/web)
// measures what serve really mounts, with the clients in processes of their
// own and the server's CPU alone.
func BenchmarkOFREPServe(b *testing.B) {
	st := ofrep.NewStore()
	if _, err := st.Apply(string(cfg), 1, []byte(suiteFlags(b)), false); err != nil {
		b.Fatal(err)
	}
	tokens, err := ofrep.ParseTokens("tokens", []byte("payments "+strings.Repeat("t", 40)))
	if err != nil {
		b.Fatal(err)
	}
	h, err := ofrep.New(ofrep.Options{Store: st, Tokens: tokens})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	srv.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	url := srv.URL + "/ofrep/v1/evaluate/flags/" + string(cfg) + "/context-aware"
	body := `{"context": {"targetingKey": "user-1", "fn": "Sulisław", "ln": "Świętopełk", "age": 29, "customer": false}}`
	b.SetParallelism(8)
	done := reportCPU(b)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+strings.Repeat("t", 40))
			res, err := srv.Client().Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Errorf("status %d", res.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "evals/s")
	done()
}
