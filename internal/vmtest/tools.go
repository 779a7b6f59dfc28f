// SPDX-License-Identifier: Apache-2.0

package vmtest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
)

// tools maps the commands the test bed runs to the Debian packages that
// provide them.
var tools = map[string]string{
	"qemu-system-x86_64":  "qemu-system-x86",
	"qemu-system-aarch64": "qemu-system-arm",
	"xz":                  "xz-utils",
	"zstd":                "zstd",
	"dpkg-deb":            "dpkg",
	"apt-get":             "apt",
}

// InstallTools installs the packages of missing test bed commands with
// apt-get. Without root it only says what is missing.
func InstallTools(ctx context.Context) error {
	var missing []string
	for cmd, pkg := range tools {
		if _, err := exec.LookPath(cmd); err != nil {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the test bed needs these Debian packages: %s (install them as root)", strings.Join(missing, " "))
	}
	slog.Info("installing test bed packages", "packages", missing)
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{
		{"update", "-q"},
		append([]string{"install", "-q", "-y", "--no-install-recommends"}, missing...),
	} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", args[0], err, out)
		}
	}
	return nil
}
