//! A test certificate authority and server/client certificates made by the test (rcgen), and
//! a private PostgreSQL cluster that serves TLS with them.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::PrivateCluster;

/// A certificate authority of the test's own.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate (PEM).
    pub cert_pem: String,
}

impl TestCa {
    /// A new CA named `name`.
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
        ];
        let key = KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("self-signed");
        TestCa {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf certificate for `names` (host names or IP addresses; for a client
    /// certificate, the first name is the CN PostgreSQL maps to a user). Returns
    /// (cert PEM, key PEM).
    pub fn leaf(&self, names: &[&str], client: bool) -> (String, String) {
        let mut params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .expect("names");
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("leaf"));
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (cert.pem(), key.serialize_pem())
    }

    /// Writes the CA certificate to `dir/name` and returns the path.
    pub fn write_cert(&self, dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, &self.cert_pem).expect("write CA");
        p
    }
}

/// Writes `content` to `path` with mode 0600 (PostgreSQL refuses a key others can read).
pub fn write_private(path: &Path, content: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, content).expect("write key");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

/// A private cluster serving TLS with a certificate for `server_names` signed by `ca`, and
/// pg_hba lines `hba` placed before the default trust lines (e.g. a `cert` rule).
pub fn tls_cluster(ca: &TestCa, server_names: &[&str], hba: &str) -> PrivateCluster {
    PrivateCluster::start_with(&[], |dir, data| {
        let (cert, key) = ca.leaf(server_names, false);
        let cert_path = dir.join("server.crt");
        let key_path = dir.join("server.key");
        let ca_path = ca.write_cert(dir, "root.crt");
        std::fs::write(&cert_path, cert).expect("server cert");
        write_private(&key_path, &key);
        crate::chown_to_server(&[&cert_path, &key_path, &ca_path]);
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("conf");
        text.push_str(&format!(
            "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\nssl_ca_file = '{}'\n",
            cert_path.display(),
            key_path.display(),
            ca_path.display()
        ));
        std::fs::write(&conf, text).expect("conf");
        let hba_path = data.join("pg_hba.conf");
        let old = std::fs::read_to_string(&hba_path).expect("hba");
        std::fs::write(&hba_path, format!("{hba}\n{old}")).expect("hba");
    })
}
