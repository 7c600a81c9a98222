//! Test-only fault injection (cargo feature `fault-injection`): a test names a service and
//! that service panics at its next turn, so the supervisor's handling of a dead service is
//! exercised for real. Without the feature every check is an empty inline function.

/// Which service should panic, if any.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    #[cfg(feature = "fault-injection")]
    panic_in: std::sync::Mutex<Option<String>>,
}

impl Faults {
    /// Called by `service` once per turn of its loop.
    #[inline]
    pub(crate) fn check(&self, service: &str) {
        #[cfg(feature = "fault-injection")]
        {
            let armed = self.panic_in.lock().expect("poisoned").as_deref() == Some(service);
            if armed {
                panic!("injected panic in {service}");
            }
        }
        #[cfg(not(feature = "fault-injection"))]
        let _ = service;
    }

    /// Makes `service` panic at its next turn.
    #[cfg(feature = "fault-injection")]
    pub(crate) fn arm(&self, service: &str) {
        *self.panic_in.lock().expect("poisoned") = Some(service.to_string());
    }
}
