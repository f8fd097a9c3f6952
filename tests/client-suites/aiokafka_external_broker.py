
# --- Appended by minikafka's tests/client-suites/run.sh ------------------------------------------
# aiokafka's fixtures start Kafka in docker; these replace them with the broker run.sh started
# (MINIKAFKA_PORTS: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL ports on 127.0.0.1). What only the
# container can do (Kafka's CLI for ACLs and SCRAM users, its Kerberos KDC) skips the test
# that asks for it.


class _NeedsKafkaContainer:
    """Stands in for ACLManager, KafkaConfig and KerberosUtils: using one skips the test."""

    def __init__(self, what):
        self._what = what

    def __getattr__(self, name):
        def skip(*args, **kwargs):
            pytest.skip(f"needs the Kafka container's {self._what} ({name})")

        return skip


@pytest.fixture(scope="session")
def docker(request):
    yield None


@pytest.fixture(scope="session")
def kafka_image(request):
    return request.config.getoption("--docker-image")


@pytest.fixture(scope="session")
def ssl_folder():
    return pathlib.Path(__file__).parent / "ssl_cert"


@pytest.fixture(scope="session")
def kafka_server():
    plain, ssl, sasl_plain, sasl_ssl = (
        int(p) for p in os.environ["MINIKAFKA_PORTS"].split(",")
    )
    yield KafkaServer("127.0.0.1", plain, ssl, sasl_plain, sasl_ssl, None)


@pytest.fixture(scope="class")
def acl_manager():
    return _NeedsKafkaContainer("kafka-acls.sh")


@pytest.fixture(scope="class")
def kafka_config():
    return _NeedsKafkaContainer("kafka-configs.sh")


@pytest.fixture(scope="class")
def kerberos_utils():
    return _NeedsKafkaContainer("Kerberos KDC")
