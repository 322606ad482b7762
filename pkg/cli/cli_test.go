package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestParse(t *testing.T) {
	cases := []struct {
		args     []string
		wantDone bool
		wantErr  string
	}{
		{args: []string{"--rate=3"}},
		{args: []string{"--help"}, wantDone: true},
		{args: []string{"--nope"}, wantErr: "unknown flag: --nope"},
		{args: []string{"--rate=3", "extra"}, wantErr: "unexpected arguments: [extra]"},
	}
	for _, tc := range cases {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Int("rate", 1, "")
		done, err := Parse(fs, tc.args)
		if done != tc.wantDone || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%v: done=%v err=%v; want done=%v err %q", tc.args, done, err, tc.wantDone, tc.wantErr)
		}
	}
}
