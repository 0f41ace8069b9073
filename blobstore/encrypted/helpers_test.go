package encrypted_test

import (
	"encoding/base64"
	"os"
)

func writeFile(p string, b []byte) error { return os.WriteFile(p, b, 0o600) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
