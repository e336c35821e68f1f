//! librdkafka client configuration: the brokers plus the user's own properties.

use rdkafka::ClientConfig;

/// Properties passed to librdkafka as they are (Flink's `setProperty`), on top of what
/// the connector sets itself.
#[derive(Debug, Clone, Default)]
pub struct KafkaProperties(pub Vec<(String, String)>);

impl KafkaProperties {
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        self.0.retain(|(k, _)| *k != key);
        self.0.push((key, value.into()));
    }

    /// The value set for `key`, if any.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// A client config for `brokers` with the connector's settings, then the user's
    /// (which win).
    pub(crate) fn client_config(&self, brokers: &str, connector: &[(&str, &str)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", brokers);
        // librdkafka logs through its own callback into `log`; its errors also reach us
        // as results, which we report with context.
        config.set("log_level", "3");
        for (key, value) in connector {
            config.set(*key, *value);
        }
        for (key, value) in &self.0 {
            config.set(key, value);
        }
        config
    }
}
