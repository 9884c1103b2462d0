// gopeer - the Go peer of tests/bench/run: what a user would write instead
// of idem, a net/http service with the pgx pool running the design
// document's textbook idempotent create (tests/bench/textbook.sql, the
// same statements with parameters): BEGIN; SELECT ... FOR UPDATE; INSERT
// the key in progress; INSERT the payment; UPDATE the key completed with
// its response and INSERT the payment.succeeded event into idem_events
// (the row idem's create writes too, sent together in one batch); COMMIT.
// Seven statements in six round trips, no authentication query (the
// secret is compared in memory and the tenant is given).  Not installed,
// not part of the suite: the benchmark builds it into its temp dir.
//
//	GOPEER_SECRET=SECRET gopeer -listen 127.0.0.1:PORT -db CONNINFO -tenant ID [-pool N]
//
// (the API key in the environment, not on the command line that every
// local user can read)
//
// POST /v1/payments with "Authorization: Bearer SECRET", an
// Idempotency-Key (an RFC 8941 sf-string or a bare token) and a body like
// the sample app's ({"amount":1234,"currency":"eur",...}) answers 201 with
// the payment; the same key again answers the stored response with
// "Idempotent-Replayed: true"; a key another request is creating right
// now answers 409.  GET /healthz answers 200 without the database.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// The statements of tests/bench/textbook.sql, each $N where it has a
// pgbench variable or a value of the request.
const (
	sqlLock = `SELECT id, state, response_status, response_body FROM idempotency_keys
  WHERE api_key_id = $1 AND key = $2 FOR UPDATE`
	sqlKey = `INSERT INTO idempotency_keys (api_key_id, key, request_method, request_path,
    request_fingerprint, state, locked_at, expires_at)
  VALUES ($1, $2, 'POST', '/v1/payments', $3, 'in_progress', now(), now() + interval '24 hours')
  RETURNING id`
	sqlPayment = `INSERT INTO payments (id, api_key_id, amount, currency, status,
    description, customer, metadata, created_at, idem_key_id)
  VALUES ($1, $2, $3, $4, 'succeeded', $5, $6, $7::jsonb, to_timestamp($8), $9)
  RETURNING id`
	sqlComplete = `UPDATE idempotency_keys SET state = 'completed', response_status = 201,
    response_headers = $1::jsonb, response_body = $2, locked_at = NULL
  WHERE id = $3`
	// the same event row as idem's idem_outbox_enqueue() writes (the tenant
	// has no webhook endpoint, so no delivery), with a W3C traceparent as
	// idem stores the request's trace with each event
	sqlEvent = `INSERT INTO idem_events (event_id, api_key_id, type, body, traceparent)
  VALUES ($1, $2, 'payment.succeeded', $3, $4)`
)

const maxBody = 1 << 20

type server struct {
	pool   *pgxpool.Pool
	tenant int64
	secret []byte
}

// The request body: the members of the sample app's payment_body.
type paymentIn struct {
	Amount      *int64            `json:"amount"`
	Currency    *string           `json:"currency"`
	Description *string           `json:"description"`
	Customer    *string           `json:"customer"`
	Metadata    map[string]string `json:"metadata"`
}

type paymentOut struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	Status         string            `json:"status"`
	AmountRefunded int64             `json:"amount_refunded"`
	Description    *string           `json:"description"`
	Customer       *string           `json:"customer"`
	Metadata       map[string]string `json:"metadata"`
	Created        int64             `json:"created"`
}

func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]interface{}{
		"type": "about:blank", "title": http.StatusText(status),
		"status": status, "detail": detail})
	w.Write(b)
}

// key: the Idempotency-Key header, an sf-string ("...") or a bare token.
func key(h string) (string, bool) {
	if len(h) >= 2 && h[0] == '"' && h[len(h)-1] == '"' {
		h = h[1 : len(h)-1]
		if strings.ContainsAny(h, "\"\\") {
			return "", false
		}
	}
	return h, len(h) >= 1 && len(h) <= 255
}

func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if c[i] < 'a' || c[i] > 'z' {
			return false
		}
	}
	return true
}

func (s *server) create(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		problem(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") ||
		subtle.ConstantTimeCompare([]byte(auth[7:]), s.secret) != 1 {
		problem(w, http.StatusUnauthorized, "a valid API key is required")
		return
	}
	k, ok := key(r.Header.Get("Idempotency-Key"))
	if !ok {
		problem(w, http.StatusBadRequest, "Idempotency-Key: 1 to 255 characters")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		problem(w, http.StatusRequestEntityTooLarge, "the body is too large or unreadable")
		return
	}
	var in paymentIn
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		problem(w, http.StatusBadRequest, "the body: "+err.Error())
		return
	}
	if in.Amount == nil || *in.Amount < 1 || in.Currency == nil ||
		!validCurrency(*in.Currency) {
		problem(w, http.StatusUnprocessableEntity, "amount (>= 1) and currency (3 lower-case letters) are required")
		return
	}
	fpr := sha256.Sum256(append([]byte("POST /v1/payments\n"), body...))

	ctx := r.Context()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "database: "+err.Error())
		return
	}
	defer tx.Rollback(context.Background())

	var id int64
	var state string
	var status *int32
	var stored []byte
	err = tx.QueryRow(ctx, sqlLock, s.tenant, k).Scan(&id, &state, &status, &stored)
	switch {
	case err == nil && state == "completed" && status != nil:
		tx.Commit(ctx)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(int(*status))
		w.Write(stored)
		return
	case err == nil:
		problem(w, http.StatusConflict, "a request with this key is in progress")
		return
	case !errors.Is(err, pgx.ErrNoRows):
		problem(w, http.StatusServiceUnavailable, "database: "+err.Error())
		return
	}

	err = tx.QueryRow(ctx, sqlKey, s.tenant, k, fpr[:]).Scan(&id)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			// another request inserted the key first and has not committed
			problem(w, http.StatusConflict, "a request with this key is in progress")
		} else {
			problem(w, http.StatusServiceUnavailable, "database: "+err.Error())
		}
		return
	}
	var rnd [36]byte // the payment id's 12 bytes, the trace's 16 and its span's 8
	if _, err := rand.Read(rnd[:]); err != nil {
		problem(w, http.StatusInternalServerError, "no random bytes")
		return
	}
	out := paymentOut{ID: "pay_" + hex.EncodeToString(rnd[:12]), Object: "payment",
		Amount: *in.Amount, Currency: *in.Currency, Status: "succeeded",
		Description: in.Description, Customer: in.Customer,
		Metadata: in.Metadata, Created: time.Now().Unix()}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	meta, _ := json.Marshal(out.Metadata)
	var pid string
	err = tx.QueryRow(ctx, sqlPayment, out.ID, s.tenant, out.Amount, out.Currency,
		out.Description, out.Customer, string(meta), out.Created, id).Scan(&pid)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "database: "+err.Error())
		return
	}
	resp, _ := json.Marshal(&out)
	loc := "/v1/payments/" + out.ID
	hdrs, _ := json.Marshal(map[string]string{
		"Content-Type": "application/json", "Location": loc})
	evid := "evt_" + k
	ev, _ := json.Marshal(map[string]interface{}{"id": evid,
		"type": "payment.succeeded", "created": out.Created,
		"data": json.RawMessage(resp)})
	batch := &pgx.Batch{}
	batch.Queue(sqlComplete, string(hdrs), resp, id)
	tp := "00-" + hex.EncodeToString(rnd[12:28]) + "-" + hex.EncodeToString(rnd[28:]) + "-01"
	batch.Queue(sqlEvent, evid, s.tenant, string(ev), tp)
	br := tx.SendBatch(ctx, batch)
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "database: "+err.Error())
		return
	}
	if err := tx.Commit(ctx); err != nil {
		problem(w, http.StatusServiceUnavailable, "database: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", loc)
	w.Header().Set("Content-Length", strconv.Itoa(len(resp)))
	w.WriteHeader(http.StatusCreated)
	w.Write(resp)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	db := flag.String("db", "", "libpq-style conninfo of the database")
	tenant := flag.Int64("tenant", 0, "api_keys.id of the one tenant")
	size := flag.Int("pool", 8, "connections in the pool")
	flag.Parse()
	secret := os.Getenv("GOPEER_SECRET")
	if *db == "" || *tenant == 0 || secret == "" || *size < 1 {
		log.Fatal("usage: GOPEER_SECRET=SECRET gopeer -listen ADDR -db CONNINFO -tenant ID [-pool N]")
	}
	cfg, err := pgxpool.ParseConfig(*db)
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = int32(*size)
	cfg.MinConns = int32(*size)
	pool, err := pgxpool.ConnectConfig(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	s := &server{pool: pool, tenant: *tenant, secret: []byte(secret)}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/payments", s.create)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Addr: *listen, Handler: mux,
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
