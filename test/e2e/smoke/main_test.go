package smoke

import (
	"os"
	"testing"

	"github.com/kproxy/kproxy/test/lab/labtest"
)

var suite = &labtest.Suite{}

func TestMain(m *testing.M) { os.Exit(suite.Main(m)) }
