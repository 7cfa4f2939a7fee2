package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/takeout/takeout/internal/staff"
)

// createStaff makes a staff login for the shop's merchant and returns it.
func (sh *shop) createStaff(t testing.TB, username, password string) staff.Account {
	t.Helper()
	r := sh.do(t, sh.apis[0], "POST", "/admin/v1/merchants/"+sh.merchantID+"/staff", sh.admin, map[string]string{"username": username, "password": password})
	if r.status != 201 {
		t.Fatalf("create staff %s: %d %s", username, r.status, r.body)
	}
	var a staff.Account
	r.json(t, &a)
	return a
}

// staffLogin logs a staff member in on api and returns the session.
func (sh *shop) staffLogin(t testing.TB, api *instance, username, password string) staff.Session {
	t.Helper()
	r := sh.do(t, api, "POST", "/admin/v1/auth/login", "", map[string]string{"username": username, "password": password})
	if r.status != 200 {
		t.Fatalf("staff login %s: %d %s", username, r.status, r.body)
	}
	var s staff.Session
	r.json(t, &s)
	return s
}

func TestStaffAccountsAndLogin(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, map[string]string{"TAKEOUT_LOGIN_LIMIT_ACCOUNT": "4", "TAKEOUT_LOGIN_LIMIT_ADDRESS": "0"})
	other := createMerchant(t, sh.stack, sh.apis[0], "Other Kitchen")
	acct := sh.createStaff(t, "wok.chef", "correct horse battery")
	if acct.MerchantID != sh.merchantID || acct.Username != "wok.chef" || acct.DisabledAt != nil {
		t.Fatalf("created %+v", acct)
	}
	var hash string
	if err := sh.pool.QueryRow(context.Background(), `SELECT password_hash FROM staff_accounts WHERE username = 'wok.chef'`).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if want := "$argon2id$v=19$m=19456,t=2,p=1$"; len(hash) < len(want) || hash[:len(want)] != want {
		t.Errorf("stored hash %q: want argon2id with OWASP's cost", hash)
	}

	t.Run("bad input and duplicates change nothing", func(t *testing.T) {
		for _, body := range []map[string]string{
			{"username": "ab", "password": "long enough password"},
			{"username": "Wok Chef", "password": "long enough password"},
			{"username": "short.pw", "password": "short"},
		} {
			r := sh.do(t, sh.apis[0], "POST", "/admin/v1/merchants/"+sh.merchantID+"/staff", sh.admin, body)
			if r.status != 422 && r.status != 400 || r.problemType() == "" {
				t.Errorf("%v: %d %s, want a problem", body, r.status, r.body)
			}
		}
		r := sh.do(t, sh.apis[1], "POST", "/admin/v1/merchants/"+other+"/staff", sh.admin, map[string]string{"username": "wok.chef", "password": "another password"})
		if r.status != 409 || r.problemType() != "already-exists" {
			t.Errorf("duplicate username: %d %s", r.status, r.body)
		}
		if r := sh.do(t, sh.apis[0], "POST", "/admin/v1/merchants/"+sh.merchantID+"/staff", sh.staffToken(t, "merchant:"+sh.merchantID), map[string]string{"username": "self.made", "password": "long enough password"}); r.status != 403 {
			t.Errorf("merchant staff creating staff: %d, want 403", r.status)
		}
		if n := sh.count(t, `SELECT count(*) FROM staff_accounts`); n != 1 {
			t.Errorf("%d accounts, want 1", n)
		}
		// A create sent six times at once on two instances: one account.
		codes := make([]int, 6)
		var wg sync.WaitGroup
		for i := range codes {
			wg.Go(func() {
				codes[i] = sh.do(t, sh.apis[i%2], "POST", "/admin/v1/merchants/"+sh.merchantID+"/staff", sh.admin,
					map[string]string{"username": "twin.cook", "password": "correct horse battery"}).status
			})
		}
		wg.Wait()
		created := 0
		for _, c := range codes {
			if c == 201 {
				created++
			} else if c != 409 {
				t.Errorf("a concurrent create answered %d", c)
			}
		}
		if n := sh.count(t, `SELECT count(*) FROM staff_accounts WHERE username = 'twin.cook'`); created != 1 || n != 1 {
			t.Errorf("6 concurrent creates: %d answered 201, %d accounts; want 1 and 1", created, n)
		}
	})

	t.Run("a login acts for its merchant only", func(t *testing.T) {
		s := sh.staffLogin(t, sh.apis[1], "WOK.CHEF", "correct horse battery")
		if s.Role != "merchant:"+sh.merchantID || s.MerchantID != sh.merchantID {
			t.Errorf("session %+v", s)
		}
		if r := sh.do(t, sh.apis[0], "GET", "/admin/v1/orders?merchant_id="+sh.merchantID, s.Token, nil); r.status != 200 {
			t.Errorf("own orders: %d %s", r.status, r.body)
		}
		if r := sh.do(t, sh.apis[0], "GET", "/admin/v1/orders?merchant_id="+other, s.Token, nil); r.status != 403 {
			t.Errorf("other merchant's orders: %d, want 403", r.status)
		}
		if r := sh.do(t, sh.apis[0], "POST", "/admin/v1/auth/logout", s.Token, nil); r.status != 204 {
			t.Fatalf("logout: %d %s", r.status, r.body)
		}
		waitUntil(t, "the logged out token refused on the other instance", func() bool {
			return sh.do(t, sh.apis[1], "GET", "/admin/v1/orders", s.Token, nil).status == 401
		})
	})

	t.Run("wrong password, unknown user and disabled account answer alike", func(t *testing.T) {
		sh.createStaff(t, "gone.chef", "correct horse battery")
		gone := sh.staffLogin(t, sh.apis[0], "gone.chef", "correct horse battery")
		r := sh.do(t, sh.apis[0], "GET", "/admin/v1/merchants/"+sh.merchantID+"/staff", gone.Token, nil)
		var list struct{ Staff []staff.Account }
		r.json(t, &list)
		var goneID string
		for _, a := range list.Staff {
			if a.Username == "gone.chef" {
				goneID = a.ID
			}
		}
		if r := sh.do(t, sh.apis[0], "DELETE", "/admin/v1/staff/"+goneID, sh.admin, nil); r.status != 200 {
			t.Fatalf("disable: %d %s", r.status, r.body)
		}
		waitUntil(t, "a disabled account's token refused on both instances", func() bool {
			return sh.do(t, sh.apis[0], "GET", "/admin/v1/orders", gone.Token, nil).status == 401 &&
				sh.do(t, sh.apis[1], "GET", "/admin/v1/orders", gone.Token, nil).status == 401
		})
		answers := map[string]response{}
		for name, creds := range map[string][2]string{
			"wrong password": {"wok.chef", "not the password"},
			"unknown user":   {"nobody.here", "correct horse battery"},
			"disabled":       {"gone.chef", "correct horse battery"},
		} {
			answers[name] = sh.do(t, sh.apis[0], "POST", "/admin/v1/auth/login", "", map[string]string{"username": creds[0], "password": creds[1]})
		}
		for name, r := range answers {
			if r.status != 401 || r.problemType() != "staff-login-failed" {
				t.Errorf("%s: %d %s", name, r.status, r.body)
			}
			if string(r.body) != string(answers["wrong password"].body) {
				t.Errorf("%s answered %s, the wrong password %s", name, r.body, answers["wrong password"].body)
			}
		}
	})

	t.Run("failed logins lock the account on every instance", func(t *testing.T) {
		sh.createStaff(t, "target.chef", "correct horse battery")
		var wg sync.WaitGroup
		codes := make([]int, 6)
		for i := range codes {
			wg.Go(func() {
				codes[i] = sh.do(t, sh.apis[i%2], "POST", "/admin/v1/auth/login", "", map[string]string{"username": "target.chef", "password": fmt.Sprint("guess", i)}).status
			})
		}
		wg.Wait()
		locked := 0
		for _, c := range codes {
			if c == 429 {
				locked++
			} else if c != 401 {
				t.Errorf("guess answered %d", c)
			}
		}
		if locked < 2 {
			t.Errorf("6 concurrent guesses with a limit of 4: %d refused as too many, want at least 2 (%v)", locked, codes)
		}
		r := sh.do(t, sh.apis[1], "POST", "/admin/v1/auth/login", "", map[string]string{"username": "target.chef", "password": "correct horse battery"})
		if r.status != 429 || r.header.Get("Retry-After") == "" || r.problemType() != "rate-limited" {
			t.Errorf("the right password on a locked account: %d %s (Retry-After %q)", r.status, r.body, r.header.Get("Retry-After"))
		}
		// Another account is not locked by this one's failures.
		sh.staffLogin(t, sh.apis[1], "wok.chef", "correct horse battery")
	})
}

func TestLoginLimitPerAddress(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, map[string]string{"TAKEOUT_LOGIN_LIMIT_ADDRESS": "3", "TAKEOUT_LOGIN_LIMIT_ACCOUNT": "0"})
	sh.createStaff(t, "pass.chef", "correct horse battery")
	statuses := []int{}
	for i := range 5 {
		statuses = append(statuses, sh.do(t, sh.apis[0], "POST", "/admin/v1/auth/login", "", map[string]string{"username": fmt.Sprint("user", i), "password": "whatever it is"}).status)
	}
	want := []int{401, 401, 401, http.StatusTooManyRequests, http.StatusTooManyRequests}
	if fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Errorf("5 logins from one address with a limit of 3: %v, want %v", statuses, want)
	}
}
