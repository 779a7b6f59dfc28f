// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// credential is who the traced command runs as with -u: ids, groups and
// the environment that names the user.
type credential struct {
	uid, gid uint32
	groups   []uint32
	name     string // USER and LOGNAME
	home     string // HOME
}

// lookupUser resolves -u's USER: a user name, or a numeric UID or
// UID:GID, as in /etc/passwd, with the user's supplementary groups from
// /etc/group. A numeric id not in /etc/passwd (a system without one, a
// container) is taken as it is, with no supplementary groups, HOME /
// and the number as the user's name; without :GID its group is the same
// number.
func lookupUser(spec string) (*credential, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	var u *user.User
	var err error
	uid, numeric := parseID(name)
	if numeric {
		u, err = user.LookupId(name)
	} else {
		u, err = user.Lookup(name)
	}
	c := &credential{}
	switch {
	case err == nil:
		id, ok := parseID(u.Uid)
		gid, gok := parseID(u.Gid)
		if !ok || !gok {
			return nil, fmt.Errorf("user %s: ids %s:%s not numeric", spec, u.Uid, u.Gid)
		}
		c.uid, c.gid, c.name, c.home = id, gid, u.Username, u.HomeDir
		gids, err := u.GroupIds()
		if err != nil {
			return nil, fmt.Errorf("user %s: its groups: %w", name, err)
		}
		for _, g := range gids {
			if id, ok := parseID(g); ok && id != gid {
				c.groups = append(c.groups, id)
			}
		}
	case numeric:
		c.uid, c.gid, c.name, c.home = uid, uid, name, "/"
	case errors.As(err, new(user.UnknownUserError)):
		return nil, fmt.Errorf("no user named %s", name)
	default:
		return nil, fmt.Errorf("user %s: %w", name, err)
	}
	if hasGroup {
		gid, ok := parseID(group)
		if !ok {
			return nil, fmt.Errorf("user %s: group %q is not a numeric GID", spec, group)
		}
		c.gid = gid
	}
	if c.home == "" {
		c.home = "/"
	}
	return c, nil
}

// parseID parses a decimal user or group id.
func parseID(s string) (uint32, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

// arg encodes c for the gate: UID:GID:G1,G2...
func (c *credential) arg() string {
	groups := make([]string, len(c.groups))
	for i, g := range c.groups {
		groups[i] = strconv.FormatUint(uint64(g), 10)
	}
	return fmt.Sprintf("%d:%d:%s", c.uid, c.gid, strings.Join(groups, ","))
}

// environ returns env with HOME, USER and LOGNAME those of c.
func (c *credential) environ(env []string) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k != "HOME" && k != "USER" && k != "LOGNAME" {
			out = append(out, kv)
		}
	}
	return append(out, "HOME="+c.home, "USER="+c.name, "LOGNAME="+c.name)
}

// becomeUser sets the process's groups, group and user to those arg (of
// credential.arg) names, in that order: once the uid changes, the groups
// cannot. Go applies each to every thread.
func becomeUser(arg string) error {
	parts := strings.Split(arg, ":")
	if len(parts) != 3 {
		return fmt.Errorf("bad credential %q", arg)
	}
	uid, uok := parseID(parts[0])
	gid, gok := parseID(parts[1])
	if !uok || !gok {
		return fmt.Errorf("bad credential %q", arg)
	}
	groups := []int{}
	if parts[2] != "" {
		for g := range strings.SplitSeq(parts[2], ",") {
			id, ok := parseID(g)
			if !ok {
				return fmt.Errorf("bad credential %q", arg)
			}
			groups = append(groups, int(id))
		}
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("set the groups of uid %d: %w", uid, err)
	}
	if err := syscall.Setgid(int(gid)); err != nil {
		return fmt.Errorf("set gid %d: %w", gid, err)
	}
	if err := syscall.Setuid(int(uid)); err != nil {
		return fmt.Errorf("set uid %d: %w", uid, err)
	}
	if os.Geteuid() != int(uid) || os.Getegid() != int(gid) {
		return fmt.Errorf("still uid %d gid %d, not %d:%d", os.Geteuid(), os.Getegid(), uid, gid)
	}
	return nil
}
