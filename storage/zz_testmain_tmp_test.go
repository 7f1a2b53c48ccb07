package storage_test

import (
	"testing"

	"github.com/legorl/legorl/storage/s3test"
)

// Temporary: storage/store_test.go will define this TestMain.
func TestMain(m *testing.M) { s3test.Main(m) }
