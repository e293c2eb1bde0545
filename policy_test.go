package cuecast

import (
	"encoding/json"
	"testing"
	"time"
)

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{`"5m"`, 5 * time.Minute, false},
		{`"1h30m"`, 90 * time.Minute, false},
		{`"250ms"`, 250 * time.Millisecond, false},
		{`"0s"`, 0, false},
		{`3000000000`, 3 * time.Second, false},
		{`"5 minutes"`, 0, true},
		{`"-5m"`, 0, true},
		{`-1`, 0, true},
		{`true`, 0, true},
	}
	for _, tt := range tests {
		var d Duration
		err := json.Unmarshal([]byte(tt.in), &d)
		if (err != nil) != tt.wantErr {
			t.Errorf("Unmarshal(%s): error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && time.Duration(d) != tt.want {
			t.Errorf("Unmarshal(%s) = %v, want %v", tt.in, time.Duration(d), tt.want)
		}
	}
}

func TestPolicyJSONRoundTrip(t *testing.T) {
	p := Policy{Stages: []Stage{
		{Name: "canary", Percent: 1, MinInstances: 2, Hold: Duration(5 * time.Minute), MaxUnhealthy: 0.05},
		{Name: "hosts", Instances: []string{"a-1"}, Labels: map[string]string{"zone": "eu"}, Hold: Duration(10 * time.Minute), MaxApplyFailures: 0.01},
		{Name: "all", Percent: 100},
	}}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"stages":[{"name":"canary","percent":1,"min_instances":2,"hold":"5m0s","max_unhealthy":0.05},` +
		`{"name":"hosts","instances":["a-1"],"labels":{"zone":"eu"},"hold":"10m0s","max_apply_failures":0.01},` +
		`{"name":"all","percent":100}]}`
	if string(b) != want {
		t.Errorf("Marshal = %s\nwant      %s", b, want)
	}
	var back Policy
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Stages[0].Hold != p.Stages[0].Hold || back.Stages[1].Labels["zone"] != "eu" || back.Stages[2].Percent != 100 {
		t.Errorf("round trip = %+v, want %+v", back, p)
	}
}

func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	if len(p.Stages) != 1 || p.Stages[0].Name != "all" || p.Stages[0].Percent != 100 {
		t.Errorf("DefaultPolicy() = %+v, want one stage all at 100%%", p)
	}
}
