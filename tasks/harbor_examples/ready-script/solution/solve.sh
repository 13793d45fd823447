#!/bin/bash
cd /app
printf '#!/bin/bash\n# Says the service is ready.\necho ready\n' > run.sh
chmod +x run.sh
