package archive

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestZeroPaddingOfAnyLengthIsAccepted(t *testing.T) {
	// Tar writers pad to their record size, which they choose: GNU tar
	// -b 2048 writes 1 MiB records. Only zeros may follow the marker.
	for _, pad := range []int{0, 100, 9 << 10, 10 << 10, 1 << 20, 1<<20 + 7, 5 << 20} {
		data := append(goodArchive(), make([]byte, pad)...)
		for name, in := range map[string][]byte{"plain": data, "zstd": zstdOf(data)} {
			if _, err := Verify(t.Context(), bytes.NewReader(in), Limits{}); err != nil {
				t.Errorf("%s, %d bytes of zero padding: %v", name, pad, err)
			}
			bad := append(bytes.Clone(data), 'x')
			if name == "zstd" {
				bad = zstdOf(bad)
			}
			if _, err := Verify(t.Context(), bytes.NewReader(bad), Limits{}); err == nil {
				t.Errorf("%s, %d bytes of zero padding then a byte of data: accepted", name, pad)
			}
		}
	}
}

func TestGNUTarWithMegabyteRecordsIsAccepted(t *testing.T) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		t.Skipf("SKIPPED: no tar command on this machine (%v); TestZeroPaddingOfAnyLengthIsAccepted covers the padding", err)
	}
	dir := t.TempDir()
	content := []byte("alpha")
	f := fileOf("state/op1/000001.sst", content)
	mustNoErr(t, os.MkdirAll(filepath.Join(dir, "state", "op1"), 0o755))
	mustNoErr(t, os.WriteFile(filepath.Join(dir, ManifestName), manifestOf(f), 0o644))
	mustNoErr(t, os.WriteFile(filepath.Join(dir, "state", "op1", "000001.sst"), content, 0o644))
	cmd := exec.Command(tarBin, "-b", "2048", "--format=ustar", "-cf", "-", "-C", dir, ManifestName, f.Path)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v: %s", cmd, err, stderr.String())
	}
	if out.Len() != 1<<20 {
		t.Fatalf("tar -b 2048 wrote %d bytes, want one 1 MiB record", out.Len())
	}
	if _, err := Verify(t.Context(), bytes.NewReader(out.Bytes()), Limits{}); err != nil {
		t.Fatalf("archive written by %s: %v", cmd, err)
	}
}
