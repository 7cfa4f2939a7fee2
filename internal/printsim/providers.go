package printsim

import (
	"crypto/rand"
	"crypto/subtle"
	"net/http"
	"strconv"
	"time"

	"github.com/takeout/takeout/internal/printing"
)

// ylyAnswer writes Yilianyun's envelope.
func ylyAnswer(w http.ResponseWriter, code, desc string, body any) {
	writeJSON(w, map[string]any{"error": code, "error_description": desc, "body": body})
}

// ylySigned checks a request's client and signature: a wrong one is
// refused with the platform's code.
func (s *Server) ylySigned(w http.ResponseWriter, r *http.Request, token bool) bool {
	if err := r.ParseForm(); err != nil {
		ylyAnswer(w, "2", "parameter error", nil)
		return false
	}
	f := r.PostForm
	want := printing.YilianyunSign(s.opts.YilianyunClientID, f.Get("timestamp"), s.opts.YilianyunSecret)
	if f.Get("client_id") != s.opts.YilianyunClientID || subtle.ConstantTimeCompare([]byte(want), []byte(f.Get("sign"))) != 1 {
		ylyAnswer(w, "4", "sign error", nil)
		return false
	}
	if sec, err := strconv.ParseInt(f.Get("timestamp"), 10, 64); err != nil || s.opts.Now().Sub(time.Unix(sec, 0)).Abs() > 10*time.Minute {
		ylyAnswer(w, "5", "timestamp expired", nil)
		return false
	}
	if token {
		s.mu.Lock()
		ok := s.tokens[f.Get("access_token")]
		s.mu.Unlock()
		if !ok {
			ylyAnswer(w, "18", "access_token invalid", nil)
			return false
		}
	}
	return true
}

func (s *Server) ylyToken(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.arrive(w, r, "yilianyun", false); !ok || !s.ylySigned(w, r, false) {
		return
	}
	tok := rand.Text()
	s.mu.Lock()
	s.tokens[tok] = true
	s.mu.Unlock()
	ylyAnswer(w, "0", "success", map[string]any{"access_token": tok, "expires_in": 2592000})
}

// ylyPrint takes a ticket; an origin_id seen within two hours gets the
// earlier ticket's id back and prints nothing.
func (s *Server) ylyPrint(w http.ResponseWriter, r *http.Request) {
	f, ok := s.arrive(w, r, "yilianyun", true)
	if !ok || !s.ylySigned(w, r, true) {
		return
	}
	machine, origin, content := r.PostForm.Get("machine_code"), r.PostForm.Get("origin_id"), r.PostForm.Get("content")
	if machine == "" || content == "" || len(origin) > 32 {
		ylyAnswer(w, "2", "parameter error", nil)
		return
	}
	if f.refuse {
		ylyAnswer(w, "16", "machine offline or not authorized", nil)
		return
	}
	if origin != "" {
		s.mu.Lock()
		earlier, seen := s.byOrigin[machine+"/"+origin]
		fresh := seen && s.opts.Now().Sub(s.originAt[machine+"/"+origin]) < printing.YilianyunWindow
		s.mu.Unlock()
		if fresh {
			ylyAnswer(w, "0", "success", map[string]string{"id": earlier.Ref, "origin_id": origin})
			return
		}
	}
	t := &ticket{Paper: Paper{Provider: "yilianyun", Device: machine, OriginID: origin, Content: content}}
	t.Ref = s.nextRef(machine)
	s.mu.Lock()
	if origin != "" {
		s.byOrigin[machine+"/"+origin] = t
		s.originAt[machine+"/"+origin] = s.opts.Now()
	}
	s.mu.Unlock()
	s.take(t)
	if f.hang {
		hang(r)
		return
	}
	ylyAnswer(w, "0", "success", map[string]string{"id": t.Ref, "origin_id": origin})
}

func (s *Server) ylyStatus(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.arrive(w, r, "yilianyun", false); !ok || !s.ylySigned(w, r, true) {
		return
	}
	s.mu.Lock()
	t, found := s.byRef[r.PostForm.Get("order_id")]
	printed := found && t.printed && t.Device == r.PostForm.Get("machine_code")
	s.mu.Unlock()
	if !found {
		ylyAnswer(w, "10", "order not found", nil)
		return
	}
	status := "0"
	if printed {
		status = "1"
	}
	ylyAnswer(w, "0", "success", map[string]string{"status": status})
}

// feieAnswer writes Feie's envelope.
func feieAnswer(w http.ResponseWriter, ret int, msg string, data any) {
	writeJSON(w, map[string]any{"ret": ret, "msg": msg, "data": data, "serverExecutedTime": 3})
}

// feie serves the one endpoint: Open_printMsg prints every time it is
// called, Open_queryOrderState answers by the id a print returned.
func (s *Server) feie(w http.ResponseWriter, r *http.Request) {
	f, ok := s.arrive(w, r, "feie", r.URL.Query().Get("apiname") == "Open_printMsg" || r.FormValue("apiname") == "Open_printMsg")
	if !ok {
		return
	}
	v := r.PostForm
	want := printing.FeieSig(s.opts.FeieUser, s.opts.FeieUKey, v.Get("stime"))
	if v.Get("user") != s.opts.FeieUser || subtle.ConstantTimeCompare([]byte(want), []byte(v.Get("sig"))) != 1 {
		feieAnswer(w, -2, "参数错误 : 签名错误", nil)
		return
	}
	switch v.Get("apiname") {
	case "Open_printMsg":
		sn, content := v.Get("sn"), v.Get("content")
		if sn == "" || content == "" {
			feieAnswer(w, -2, "参数错误", nil)
			return
		}
		if f.refuse {
			feieAnswer(w, 1002, "打印机编号不存在或未添加", nil)
			return
		}
		t := &ticket{Paper: Paper{Provider: "feie", Device: sn, Content: content}, backURL: v.Get("backurl")}
		t.Ref = s.nextRef(sn)
		s.take(t)
		if f.hang {
			hang(r)
			return
		}
		feieAnswer(w, 0, "ok", t.Ref)
	case "Open_queryOrderState":
		s.mu.Lock()
		t, found := s.byRef[v.Get("orderid")]
		printed := found && t.printed
		s.mu.Unlock()
		if !found {
			feieAnswer(w, 1003, "订单不存在", nil)
			return
		}
		feieAnswer(w, 0, "ok", printed)
	default:
		feieAnswer(w, -2, "参数错误 : apiname", nil)
	}
}
