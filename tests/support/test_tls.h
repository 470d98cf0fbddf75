// TLS for tests, through OpenSSL's C API (no files committed, no openssl CLI):
//  - TestCa: a throwaway CA made at test time, and the certificates it signs (a wildcard for a
//    preview domain), each with a P-256 key, written as PEM files;
//  - TlsClient: a blocking TLS client on a raw socket, for tests that must say exactly what a
//    client sends and see exactly what came back (the served certificate, ALPN, a clean
//    close_notify). Every read and write is bounded by the socket's own timeouts, so a test
//    cannot hang on it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace berth::testing {

using PKeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;

inline std::string OpenSslErrorText() {
  unsigned long e = ERR_get_error();
  while (ERR_get_error() != 0) {
  }
  if (e == 0) return "no OpenSSL error";
  char text[256];
  ERR_error_string_n(e, text, sizeof(text));
  return text;
}

inline PKeyPtr NewTestKey() {
  PKeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), EVP_PKEY_free);
  if (!key) throw std::runtime_error("keygen: " + OpenSslErrorText());
  return key;
}

inline void WritePemFile(const std::filesystem::path& path, const std::function<int(BIO*)>& write) {
  // Written beside, then renamed: a reader (berthd re-reading a renewal) sees old or new, whole.
  auto tmp = path;
  tmp += ".tmp";
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(tmp.c_str(), "w"), BIO_free);
  if (!bio || write(bio.get()) != 1) throw std::runtime_error("write " + tmp.string() + ": " + OpenSslErrorText());
  bio.reset();
  std::filesystem::rename(tmp, path);
}

class TestCa {
 public:
  TestCa() : key_(NewTestKey()), cert_(Make(key_.get(), "Berth test CA", 1, true, "")) {}

  // The CA's certificate, what a client trusts.
  void WriteCert(const std::filesystem::path& path) const {
    WritePemFile(path, [&](BIO* b) { return PEM_write_bio_X509(b, cert_.get()); });
  }

  // A server certificate for `san` (e.g. "DNS:*.preview.test") named `cn`, with `serial`, and a
  // new key: written to `cert_file` (followed by the CA's certificate, a chain) and `key_file`.
  void Issue(const std::string& cn, const std::string& san, long serial,
             const std::filesystem::path& cert_file, const std::filesystem::path& key_file) const {
    auto key = NewTestKey();
    auto cert = Make(key.get(), cn, serial, false, san);
    WritePemFile(key_file, [&](BIO* b) {
      return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
    });
    WritePemFile(cert_file, [&](BIO* b) {
      return PEM_write_bio_X509(b, cert.get()) == 1 && PEM_write_bio_X509(b, cert_.get()) == 1 ? 1 : 0;
    });
  }

  // A key of its own, matching no certificate.
  static void WriteStrayKey(const std::filesystem::path& key_file) {
    auto key = NewTestKey();
    WritePemFile(key_file, [&](BIO* b) {
      return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
    });
  }

 private:
  X509Ptr Make(EVP_PKEY* key, const std::string& cn, long serial, bool ca, const std::string& san) const {
    X509Ptr x(X509_new(), X509_free);
    X509_set_version(x.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x.get()), serial);
    X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x.get()), 7 * 24 * 3600);
    X509_set_pubkey(x.get(), key);
    X509_NAME* name = X509_get_subject_name(x.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1,
                               -1, 0);
    X509* issuer = ca ? x.get() : cert_.get();
    X509_set_issuer_name(x.get(), X509_get_subject_name(issuer));
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x.get(), nullptr, nullptr, 0);
    auto add = [&](int nid, const std::string& value) {
      X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
      if (e == nullptr) throw std::runtime_error("extension " + value + ": " + OpenSslErrorText());
      X509_add_ext(x.get(), e, -1);
      X509_EXTENSION_free(e);
    };
    if (ca) {
      add(NID_basic_constraints, "critical,CA:TRUE");
      add(NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
      add(NID_basic_constraints, "critical,CA:FALSE");
      add(NID_key_usage, "critical,digitalSignature");
      add(NID_ext_key_usage, "serverAuth");
      add(NID_subject_alt_name, san);
    }
    if (X509_sign(x.get(), ca ? key : key_.get(), EVP_sha256()) == 0) {
      throw std::runtime_error("sign: " + OpenSslErrorText());
    }
    return x;
  }

  PKeyPtr key_;
  X509Ptr cert_;
};

class TlsClient {
 public:
  struct Options {
    std::string sni;                         // server name sent and checked (wildcards match)
    std::filesystem::path ca_file;           // the only certificate trusted
    const char* source = nullptr;            // a loopback address to connect from
    std::string alpn = std::string("\x08http/1.1", 9);  // wire form; empty: none offered
    std::chrono::milliseconds timeout{20'000};           // each read and write
    bool handshake = true;                   // false: TCP only (tests of the handshake itself)
  };

  TlsClient(uint16_t port, Options options) : options_(std::move(options)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      Failed("socket");
      return;
    }
    timeval tv{};
    tv.tv_sec = options_.timeout.count() / 1000;
    tv.tv_usec = (options_.timeout.count() % 1000) * 1000;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (options_.source != nullptr) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      if (::inet_pton(AF_INET, options_.source, &from.sin_addr) != 1 ||
          ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
        Failed("bind");
        return;
      }
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      Failed("connect");
      return;
    }
    if (options_.handshake) Handshake();
  }
  ~TlsClient() {
    ssl_.reset();
    ctx_.reset();
    if (fd_ >= 0) ::close(fd_);
  }
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  // The TLS handshake (when Options::handshake was false); false with error() on failure.
  bool Handshake() {
    ctx_.reset(SSL_CTX_new(TLS_client_method()));
    if (!ctx_ || SSL_CTX_load_verify_locations(ctx_.get(), options_.ca_file.c_str(), nullptr) != 1) {
      Failed("trust " + options_.ca_file.string());
      return false;
    }
    SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER, nullptr);
    ssl_.reset(SSL_new(ctx_.get()));
    SSL_set_fd(ssl_.get(), fd_);
    SSL_set_tlsext_host_name(ssl_.get(), options_.sni.c_str());
    SSL_set1_host(ssl_.get(), options_.sni.c_str());
    if (!options_.alpn.empty()) {
      SSL_set_alpn_protos(ssl_.get(), reinterpret_cast<const unsigned char*>(options_.alpn.data()),
                          static_cast<unsigned>(options_.alpn.size()));
    }
    if (SSL_connect(ssl_.get()) != 1) {
      Failed("handshake");
      return false;
    }
    return true;
  }

  // Connected (and through the handshake, when it was asked for).
  bool ok() const { return error_.empty() && fd_ >= 0 && (ssl_ != nullptr || !options_.handshake); }
  const std::string& error() const { return error_; }
  int fd() const { return fd_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      int n = SSL_write(ssl_.get(), data.data(), static_cast<int>(data.size()));
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Sends close_notify, this side's half-close (TLS 1.3 lets the peer go on sending; OpenSSL
  // lets this side go on reading).
  bool SendCloseNotify() { return SSL_shutdown(ssl_.get()) >= 0; }

  // Reads once; false at the end (closed_cleanly() says whether by close_notify) or timeout.
  bool ReceiveSome() {
    char buf[16 * 1024];
    int n = SSL_read(ssl_.get(), buf, sizeof(buf));
    if (n > 0) {
      received_.append(buf, static_cast<size_t>(n));
      return true;
    }
    clean_close_ = SSL_get_error(ssl_.get(), n) == SSL_ERROR_ZERO_RETURN;
    ERR_clear_error();
    return false;
  }
  // Everything until the server ends the connection.
  std::string ReadToClose() {
    while (ReceiveSome()) {
    }
    return received_;
  }
  // One whole answer (its header, then a Content-Length body or a chunked one to its end),
  // taken off what was received.
  std::string ReadResponse() {
    for (;;) {
      size_t head = received_.find("\r\n\r\n");
      if (head != std::string::npos) {
        std::string lower = received_.substr(0, head);
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        size_t end = std::string::npos;
        if (auto cl = lower.find("\r\ncontent-length:"); cl != std::string::npos) {
          end = head + 4 + std::stoul(lower.substr(cl + 17));
          if (received_.size() < end) end = std::string::npos;
        } else if (lower.find("transfer-encoding: chunked") != std::string::npos) {
          if (auto last = received_.find("\r\n0\r\n\r\n", head); last != std::string::npos) end = last + 7;
        } else {
          end = head + 4;
        }
        if (end != std::string::npos) {
          std::string out = received_.substr(0, end);
          received_.erase(0, end);
          return out;
        }
      }
      if (!ReceiveSome()) {
        std::string out = std::move(received_);
        received_.clear();
        return out;
      }
    }
  }
  // Whether the server ended with close_notify (a clean TLS end) rather than a bare FIN.
  bool closed_cleanly() const { return clean_close_; }

  // What the server presented and agreed.
  long PeerSerial() const {
    X509Ptr peer(SSL_get1_peer_certificate(ssl_.get()), X509_free);
    return peer ? ASN1_INTEGER_get(X509_get0_serialNumber(peer.get())) : -1;
  }
  std::string PeerSubject() const {
    X509Ptr peer(SSL_get1_peer_certificate(ssl_.get()), X509_free);
    if (!peer) return {};
    char text[256] = {};
    X509_NAME_oneline(X509_get_subject_name(peer.get()), text, sizeof(text));
    return text;
  }
  std::string Alpn() const {
    const unsigned char* data = nullptr;
    unsigned int len = 0;
    SSL_get0_alpn_selected(ssl_.get(), &data, &len);
    return std::string(reinterpret_cast<const char*>(data), len);
  }
  std::string Version() const { return SSL_get_version(ssl_.get()); }

 private:
  void Failed(const std::string& what) {
    error_ = what + ": " + OpenSslErrorText() + " (errno " + std::to_string(errno) + ")";
  }

  Options options_;
  int fd_ = -1;
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx_{nullptr, SSL_CTX_free};
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl_{nullptr, SSL_free};
  std::string error_;
  std::string received_;
  bool clean_close_ = false;
};

}  // namespace berth::testing
